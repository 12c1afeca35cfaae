# protoc compiles event.proto into the library; the generated header is
# "sprintnet/tensorboard/event.pb.h" under the build's src/ (the tests read events back with it).
# Included from src/CMakeLists.txt: custom commands must live in the target's directory.
protobuf_generate(TARGET sprintnet LANGUAGE cpp PROTOS ${CMAKE_CURRENT_SOURCE_DIR}/sprintnet/tensorboard/event.proto
                  IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR} PROTOC_OUT_DIR ${PROJECT_BINARY_DIR}/src)
target_include_directories(sprintnet PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/src>)
