"""High availability: the pure Lease state machine, the elector, the startup gate and their metrics."""
