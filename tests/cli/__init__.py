"""The hermes-store command line, run as a real process."""
