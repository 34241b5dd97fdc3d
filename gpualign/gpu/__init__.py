"""What every GPU code path shares (the engines, the device reader, the device's output lines, search): the
one kernel loader (kernels.py: images built ahead or cached, images.py; else NVRTC now, nvrtc.py), device
array operations (arrays.py) and host <-> device transfers (staging.py)."""
