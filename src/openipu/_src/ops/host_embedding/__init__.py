"""Host embeddings: tables on the host that IPU programs look up and train."""
