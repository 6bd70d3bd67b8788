"""Results service: exactly-once outcome records, output/error files, the results endpoint,
usage and cost, and batch-end webhooks."""
