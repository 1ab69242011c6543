"""threadkeep-mongodb: placeholder until its issue lands."""
