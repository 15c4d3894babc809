print("mirror-sim")
