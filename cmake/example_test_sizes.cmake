# How much work the examples' smoke tests do (examples/CMakeLists.txt, tests/mpi/CMakeLists.txt).
# A sanitizer build (scripts/sanitize.sh builds it at -O0, where an example trains 20-50 times slower
# than in a release build) runs the same code paths, flags and assertions on less work. Measured on the
# Zen 3 CI machine kind, ASan + UBSan at -O0: lenet5 --limit 600 took 45 s, 39 of them measuring the
# accuracy on all 10,000 test images; neural_ode --iterations 400 took 121 s (50 iterations lower the
# loss 1,222 times, the test asks for 100); pinn --steps 30 --lbfgs-steps 10, 48 s per run.
if(CHAINLET_SANITIZE)
  set(CHAINLET_TEST_SIZE_node_check 25)        # neural_ode --check-gradient (components)
  set(CHAINLET_TEST_SIZE_node_adam 50)         # neural_ode --iterations with Adam
  set(CHAINLET_TEST_SIZE_node_lbfgs 30)        # neural_ode --iterations with L-BFGS
  set(CHAINLET_TEST_SIZE_lenet5_checksum 300)  # lenet5 --limit, 1 and 2 threads
  set(CHAINLET_TEST_SIZE_lenet5_small 200)     # lenet5 --limit, checkpoints and MPI
  set(CHAINLET_TEST_SIZE_test_images 500)      # lenet5 --test-limit
  set(CHAINLET_TEST_SIZE_pinn_steps 8)         # pinn --steps
  set(CHAINLET_TEST_SIZE_pinn_lbfgs 3)         # pinn --lbfgs-steps
  set(CHAINLET_TEST_SIZE_pinn_points 512)      # pinn --points: 8 chunks of 64 inside, 2 on the boundary
else()
  set(CHAINLET_TEST_SIZE_node_check 100)
  set(CHAINLET_TEST_SIZE_node_adam 400)
  set(CHAINLET_TEST_SIZE_node_lbfgs 100)
  set(CHAINLET_TEST_SIZE_lenet5_checksum 1500)
  set(CHAINLET_TEST_SIZE_lenet5_small 600)
  set(CHAINLET_TEST_SIZE_test_images 2000)
  set(CHAINLET_TEST_SIZE_pinn_steps 30)
  set(CHAINLET_TEST_SIZE_pinn_lbfgs 10)
  set(CHAINLET_TEST_SIZE_pinn_points 1024)     # the example's default
endif()
