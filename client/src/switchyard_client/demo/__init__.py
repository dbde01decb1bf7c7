"""The demo provider's agent (agent.py), run as ``python -m switchyard_client.demo_agent``."""
