module github.com/lanesdev/lanes/tracing

go 1.26.0
