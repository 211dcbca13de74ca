"""Concurrency and durability: writers at once, crashes, forks, a full disk, asyncio."""
