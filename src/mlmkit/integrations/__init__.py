"""Bridges to other engines: `mlmkit.integrations.ray` (Ray Data batch inference)."""
