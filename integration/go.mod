module github.com/lanesdev/lanes/integration

go 1.26.0
