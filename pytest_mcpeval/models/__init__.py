"""Model clients.  ``config`` resolves names; ``litellm_client`` makes the calls (imported lazily)."""
