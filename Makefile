# lanes — the project's vocabulary. Every target works from a clean clone:
# Go fetches what it needs through the module proxy.

MODULES := hashring eventid tracing producer consumer integration cmd/lanes
GO      ?= go
TESTFLAGS ?= -race -count=1 -timeout 20m
BENCHFLAGS ?= -run '^$$' -bench . -benchmem -count 1

KAFKA_SH := integration/kafka/kafka.sh

.PHONY: test test-kafka bench lint demo fmt tidy

## test: every module, -race, on the embedded broker (kfake)
test:
	@set -e; for m in $(MODULES); do echo "== test $$m"; (cd $$m && $(GO) test $(TESTFLAGS) ./...); done

## test-kafka: the integration suite against a real Apache Kafka 4.x broker
## (started from Maven Central jars with the machine's Java, always stopped)
test-kafka:
	@$(KAFKA_SH) start
	@rc=0; eval "$$($(KAFKA_SH) env | sed 's/^/export /')"; \
	  (cd integration && $(GO) test $(TESTFLAGS) ./...) || rc=$$?; \
	  $(KAFKA_SH) stop; exit $$rc

## bench: Go benchmarks of every module
bench:
	@set -e; for m in $(MODULES); do echo "== bench $$m"; (cd $$m && $(GO) test $(BENCHFLAGS) ./...); done

## lint: gofmt, go vet, and each module building on its own (GOWORK=off)
lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./... && GOWORK=off $(GO) build ./... && GOWORK=off $(GO) vet ./...); done

## demo: the chat demo on the embedded broker
demo:
	$(GO) run ./cmd/lanes demo

fmt:
	gofmt -w $(MODULES)

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy); done
