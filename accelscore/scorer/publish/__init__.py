"""Publishing to the hub: the pure publish policy, the AddOnPlacementScore writer and its worker thread."""
