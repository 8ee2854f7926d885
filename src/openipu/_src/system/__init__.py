"""The emulated IPU system: how many IPUs there are, their host devices, and configuration."""
