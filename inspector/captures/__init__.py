"""Captures: stored streams, their frames, and what the assembler made of them."""
