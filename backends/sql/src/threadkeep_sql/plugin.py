"""Entry-point plugin registering the SQL drivers."""
