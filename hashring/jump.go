package hashring

// Jump returns the bucket in [0, buckets) for key, using jump consistent hash
// (Lamping and Veach, 2014). When buckets grows from n to n+1, about 1/(n+1)
// of the keys move, and every one of them moves to the new bucket n.
//
// Jump returns -1 when buckets < 1; callers that validate their bucket count
// up front (as the consumer does for its shard count) never see it.
func Jump(key uint64, buckets int) int {
	if buckets < 1 {
		return -1
	}
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
