"""NumGen: number sense of text-to-image models. A leaf: it imports only the kernel."""
