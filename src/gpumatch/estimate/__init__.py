"""Pure estimators: memory, roofline time, communication, power and cost. No torch, no store."""
