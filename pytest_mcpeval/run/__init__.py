"""Executing cases.  ``single`` runs one model call per case; multi-step flows will live beside it."""
