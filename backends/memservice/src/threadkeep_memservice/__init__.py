"""threadkeep-memservice: placeholder until its issue lands."""
