module github.com/lanesdev/lanes/producer

go 1.26.0
