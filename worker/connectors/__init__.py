"""Connectors: the sinks memory is published to and the sources the scan reads."""
