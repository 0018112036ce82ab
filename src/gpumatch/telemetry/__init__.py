"""GPU telemetry: the Device protocol, the NVML backend (the only pynvml import), replay devices, the sampler."""
