"""Workflows: interaction patterns between an actor (and other agents) and a phone."""
