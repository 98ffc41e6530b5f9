package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "lanes: no commands yet")
	os.Exit(2)
}
