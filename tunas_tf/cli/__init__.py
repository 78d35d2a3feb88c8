"""What makes a binary: its flags, its process, the commands it suggests."""
