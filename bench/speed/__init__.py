"""Speed and cost: wall time, CPU, memory, requests and prompt characters."""
