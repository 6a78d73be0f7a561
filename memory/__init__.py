"""Memory: what of the history an agent's prompt contains.

Stage 1 is :class:`~darwin.memory.sliding_window.SlidingWindowMemory`; stage 2 is
:class:`~darwin.memory.llm.LLMMemoryManager` (an external model distils episodes into app
knowledge kept in SQL). The interface is :class:`~darwin.memory.base.Memory`; import each
name from the module that holds it.
"""
