# idiom: StandardScaler + MLPClassifier(early_stopping=True) pipeline, GridSearchCV over alpha and the hidden layer size with scoring='neg_log_loss', best_params_ printed; intended: valid
import pandas as pd
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
for frame in (train, test):
    frame["is_male"] = (frame["gender"] == "male").astype(int)

features = ["age", "economic.cond.national", "economic.cond.household", "Blair", "Hague", "Kennedy", "Europe",
            "political.knowledge", "is_male"]
pipe = Pipeline([
    ("scale", StandardScaler()),
    ("mlp", MLPClassifier(max_iter=500, early_stopping=True, validation_fraction=0.15, random_state=0)),
])
grid = GridSearchCV(pipe, {"mlp__alpha": [1e-3, 1e-2, 1e-1], "mlp__hidden_layer_sizes": [(16,), (32,)]},
                    scoring="neg_log_loss", cv=3)
grid.fit(train[features], train["vote"])
print("best:", grid.best_params_, "CV log loss:", round(-grid.best_score_, 4))

proba = grid.predict_proba(test[features])
result = pd.DataFrame(proba, columns=grid.classes_)
result.insert(0, "id", test["id"])
result.to_csv("submission.csv", index=False)
