"""Curricula: which task a free phone runs next."""
