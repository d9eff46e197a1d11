"""The storage variants' read behaviour, one module per variant, composed once when a store is opened
(:mod:`.behaviour`)."""
