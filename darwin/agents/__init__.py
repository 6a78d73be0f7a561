"""Agents: who chooses actions. VLM agents build prompts (psi) and parse responses (xi).

    >>> from darwin.agents.qwen import QwenVLAgent
    >>> from darwin.agents.tiny import TinyAgent
    >>> from darwin.agents.uitars import UITarsAgent
    >>> UITarsAgent(version="1.0").convention.kind, QwenVLAgent(version="2.5").convention.kind
    ('relative', 'resized_image')

See docs/agents.md for prompt formats, coordinate conventions and writing your own agent.
"""
