"""Access control: roles, tokens and tenants (pure model); the store and the API enforce it."""
