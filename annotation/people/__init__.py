"""People: accounts and roles (checked server-side), the admin's invites, resets and audit log,
login sessions and tokens, and `acting` (one transaction as a logged-in account)."""
