"""Infeeds and outfeeds: how data streams between the host and an emulated IPU."""
