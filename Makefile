# lanes — the project's vocabulary. Every target works from a clean clone:
# Go fetches what it needs through the module proxy.

MODULES := hashring eventid tracing producer consumer lanestest codec codec/avrocodec codec/protocodec codec/srcodec dedup dedup/redisdedup dedup/pgdedup examples integration cmd/lanes internal/release
GO      ?= go
# staticcheck at a pinned version; go run fetches it through the module proxy.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# release: the version to cut; APPLY=1 commits and tags (a dry run otherwise)
VERSION ?=
APPLY   ?=
TESTFLAGS ?= -race -count=1 -timeout 20m
# test-long: the tests make test's quick form (-short) skips or runs
# smaller (longtest.Only and longtest.Size in the consumer module, longOnly and
# quickSize in the others, protocolsFor), run at
# full size by name. make test exports the list, and such a test it does
# not name fails there, so nothing cut from the quick form leaves CI.
LONG_MODULES := consumer integration cmd/lanes
LONG_TESTS   ?= ^(TestCrashScenario|TestCrashExactlyOnce|TestTransactionsZombie|TestKfakeKeepsDeadJoiner|TestKfakeCloseMeetsSleep|TestEnvSleepsEndBeforeClose|TestParkCrash|TestGrowthMemberKilled|TestScaleScenario|TestRebalanceStorm|TestParkModel|TestPartitionModel|TestParkSetDifferential|TestBreakerModel|TestBreakerOutage|TestBreakerOutageBatch|TestReadyIdleMember|TestNotReadyWhileKIP848SessionRestarts|TestReadyAfterCoordinatorDies|TestReadyAfterBrokerCloses|TestSilenceHoldDuringShutdown|TestSilenceHoldThroughRebalance|TestSilentMemberHoldsWork|TestRefusedHeartbeatsHoldWork|TestHeartbeatsTakenOnTheWire|TestSilenceHoldCutsAndResumes|TestBenchStuckSmall|TestBenchScaleSmall|TestTopicMadeAgain|TestPausedMemory)$$
# test-kafka: the consumer group protocols the integration suite runs under
GROUP_PROTOCOLS ?= classic consumer
# test-cluster: the broker-fault scenarios (go test -run)
CLUSTER_TESTS ?= ^TestCluster
BENCHFLAGS ?= -run '^$$' -bench . -benchmem -count 1

KAFKA_SH := integration/kafka/kafka.sh

.PHONY: test test-long test-kafka test-cluster test-dedup bench lint demo fmt tidy release release-check

## test: the quick form, what a contributor runs before every commit:
## every module, -race, -short, on the embedded broker (kfake); the long
## scenarios (crash, park crash, scale, rebalance storm), the soak and
## outage tests and the bench runs are skipped, the model tests run fewer
## seeds and the protocol-matrix tests one group protocol (test-long runs
## them in full). Every module is tested; the failing ones are listed at
## the end.
test:
	@failed=""; for m in $(MODULES); do echo "== test $$m"; \
	  (cd $$m && LANES_LONG_TESTS='$(LONG_TESTS)' $(GO) test $(TESTFLAGS) -short ./...) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "test failed in:$$failed"; exit 1; fi

## test-long: the tests make test leaves out or cuts (LONG_TESTS), in full,
## -race, on the embedded broker; .ci/run runs it after make test
test-long:
	@failed=""; for m in $(LONG_MODULES); do echo "== test-long $$m"; \
	  (cd $$m && $(GO) test $(TESTFLAGS) -run '$(LONG_TESTS)' ./...) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-long failed in:$$failed"; exit 1; fi

## test-kafka: the integration suite against a real Apache Kafka 4.x broker
## (started from Maven Central jars with the machine's Java, always stopped),
## once per consumer group protocol: classic, then consumer (KIP-848)
test-kafka:
	@$(KAFKA_SH) start
	@rc=0; eval "$$($(KAFKA_SH) env | sed 's/^/export /')"; \
	  for p in $(GROUP_PROTOCOLS); do echo "== integration, group protocol $$p"; \
	    (cd integration && LANES_GROUP_PROTOCOL=$$p $(GO) test $(TESTFLAGS) ./...) || rc=$$?; done; \
	  $(KAFKA_SH) stop; exit $$rc

## test-cluster: the broker-fault scenarios (a partition leader, the
## active controller, the group coordinator killed; a rolling restart)
## against a three-node Kafka cluster (kafka.sh with LANES_KAFKA_NODES=3,
## always stopped), once per consumer group protocol
test-cluster: export LANES_KAFKA_NODES = 3
test-cluster:
	@$(KAFKA_SH) start
	@rc=0; eval "$$($(KAFKA_SH) env | sed 's/^/export /')"; \
	  for p in $(GROUP_PROTOCOLS); do echo "== broker faults on three nodes, group protocol $$p"; \
	    (cd integration && LANES_GROUP_PROTOCOL=$$p $(GO) test $(TESTFLAGS) -v -run '$(CLUSTER_TESTS)' .) || rc=$$?; done; \
	  $(KAFKA_SH) stop; exit $$rc

## test-dedup: the dedup stores' suite against a real PostgreSQL and Redis
## (dedup/testservers.sh starts them on loopback and always stops them)
test-dedup:
	@dedup/testservers.sh start
	@rc=0; eval "$$(dedup/testservers.sh env | sed 's/^/export /')"; \
	  for m in dedup dedup/redisdedup dedup/pgdedup; do \
	    (cd $$m && CI=true $(GO) test $(TESTFLAGS) ./...) || rc=$$?; done; \
	  dedup/testservers.sh stop; exit $$rc

## bench: Go benchmarks of every module
bench:
	@set -e; for m in $(MODULES); do echo "== bench $$m"; (cd $$m && $(GO) test $(BENCHFLAGS) ./...); done

# standalone: run a go command in one module outside the workspace
# (GOWORK=off) with its siblings from the checkout (internal/release
# standalone); go.mod files keep no replace directives
RELEASE_TOOL := bin/release
STANDALONE    = $(CURDIR)/$(RELEASE_TOOL) standalone -root $(CURDIR)

$(RELEASE_TOOL): $(wildcard internal/release/*.go) internal/release/go.mod
	cd internal/release && $(GO) build -o $(CURDIR)/$(RELEASE_TOOL) .

## lint: gofmt, then per module: go vet, building and vetting on its own
## (GOWORK=off, siblings from the checkout), staticcheck. Every module is
## linted; the failing ones are listed at the end.
lint: $(RELEASE_TOOL)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@failed=""; for m in $(MODULES); do \
	  echo "== lint $$m"; \
	  (cd $$m && $(GO) vet ./... && $(STANDALONE) -dir $$m -- build ./... && \
	    $(STANDALONE) -dir $$m -- vet ./... && $(STATICCHECK) ./...) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "lint failed in:$$failed"; exit 1; fi

## release: cut release VERSION: rewrite sibling requirements, commit, tag
## <module>/VERSION in dependency order (dry run unless APPLY=1)
release:
	@if [ -z "$(VERSION)" ]; then echo "usage: make release VERSION=vX.Y.Z [APPLY=1]"; exit 2; fi
	cd internal/release && $(GO) run . tag -root ../.. -version $(VERSION) $(if $(APPLY),-apply)

## release-check: check what make release would tag: cut the release of
## the newest CHANGELOG version (or VERSION) from HEAD in a clone, as make
## release APPLY=1 does (this checkout is only read: no tag, no commit;
## uncommitted changes are not checked, and it says so), serve every module
## from its tag in a module-proxy folder, and outside the workspace: go
## get, build and run a program that uses consumer, producer, lanestest and
## codec (JSON) and check it builds no protobuf, Avro or registry package;
## go install the CLI and run lanes version ("go install ok"), check that
## it downloaded none of lanes-lab's modules, go install lanes-lab and run
## lanes-lab -h; follow
## docs/tutorial.md in a module of its own: its go commands and files,
## lanes broker, the program typed its input block and printing its output
## block ("tutorial ok")
release-check:
	cd internal/release && $(GO) run . check -root ../.. $(if $(VERSION),-version $(VERSION))

## demo: the chat demo on the embedded broker (lanes-lab demo)
demo:
	$(GO) run ./cmd/lanes/lanes-lab demo

fmt:
	gofmt -w $(MODULES)

## tidy: go mod tidy in every module, outside the workspace, siblings from
## the checkout
tidy: $(RELEASE_TOOL)
	@set -e; for m in $(MODULES); do $(STANDALONE) -dir $$m -tidy; done
