package clusterinfo

import "errors"

// ErrNoLeader: the partition has no leader right now (an election is under
// way, or too few replicas are alive); ask again.
var ErrNoLeader = errors.New("partition has no leader")
