"""Imports from files people write (SPEC §5): priority files and campaign definitions."""
