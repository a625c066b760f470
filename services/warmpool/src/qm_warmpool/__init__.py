"""The warm-pool service: owns the timers of pool lifecycles (and attempt deadlines)."""
