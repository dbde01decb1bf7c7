"""Watching a run from its card: the agent's conversation as people read it, the run's raw log,
its attempts. The parsers (claude_stream, codex_jsonl) read a provider's structured output; the
ledger and the session's events stand in for providers that print text (demo, shell)."""
