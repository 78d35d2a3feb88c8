"""What crosses the package's edge: files and records written atomically and
read back checked, settings' checks, error lines, native output."""
