"""The fixed experiment package; the only place torch is imported."""
