"""The shared layers under every feature: devices and threads, progress, reading records,
writing outputs, argument checks, batching and process groups. Find the one here before
writing another."""
