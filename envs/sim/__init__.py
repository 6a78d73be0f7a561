"""SimPhone: a deterministic simulated Android-like phone for training and tests."""
