module github.com/lanesdev/lanes/cmd/lanes

go 1.26.0
