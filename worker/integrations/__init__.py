"""Integrations: the chat side's LangChain and deepagents helpers."""
