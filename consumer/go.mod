module github.com/lanesdev/lanes/consumer

go 1.26.0
