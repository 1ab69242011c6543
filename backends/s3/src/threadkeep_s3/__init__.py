"""threadkeep-s3: placeholder until its issue lands."""
